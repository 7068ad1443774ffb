"""The pure core: named types, keys, text and money rules, the email's wire format.

Nothing here does I/O or imports SQLAlchemy, Prefect, smtplib or openai: every
function is a function of its arguments, tested directly and with generated inputs.
pandas comes from `frames`, configured there.
"""
