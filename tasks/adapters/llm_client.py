"""The LLM client (G7): drafts the personalised paragraph of REMINDED_1/REMINDED_2 emails
through the official `openai` client, against any OpenAI-compatible endpoint, bounded:
a timeout per call, a number of calls in flight, a budget per run, and a breaker that
stops calling after repeated API failures. Every failure falls back to the template
paragraph (`core.llm_guard`); drafting never raises for one row. `openai` is imported
only when drafting is on.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.llm_guard import (
    DRAFTED_STEPS,
    OFF_NOTE,
    Draft,
    Reminder,
    build_messages,
    parse_reply,
    reminders,
    template_draft,
)
from dueflow.tasks.core.tone import judge

log = logging.getLogger("dueflow.llm")
# Room for the short JSON reply, and for the hidden reasoning of reasoning models.
MAX_COMPLETION_TOKENS = 1024


class _Breaker:
    """Counts consecutive API failures across worker threads; open = stop calling."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._failures = 0
        self._last = ""

    def failure(self, note: str) -> None:
        with self._lock:
            self._failures += 1
            self._last = note

    def success(self) -> None:
        with self._lock:
            self._failures = 0

    def open_note(self) -> str | None:
        with self._lock:
            if self._failures < self.limit:
                return None
            return f"LLM skipped: {self._failures} API failures in a row (last: {self._last})"


def _error_note(exc: Exception, config: LLMConfig) -> str:
    """One short line, no secrets, no stack trace. Timeout first: it is a connection error."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return f"LLM call timed out after {config.timeout_s:g} s"
    if isinstance(exc, openai.APIConnectionError):
        return "LLM API unreachable (connection error)"
    if isinstance(exc, openai.RateLimitError):
        return "LLM API rate limit: HTTP 429"
    if isinstance(exc, openai.APIStatusError):
        return f"LLM API error: HTTP {exc.status_code}"
    return f"LLM call failed ({type(exc).__name__})"


def _fallback(reminder: Reminder, note: str, usage: tuple[int, int] = (0, 0)) -> Draft:
    log.info("dunning paragraph for %s: template used (%s)", reminder.key, note)
    return template_draft(reminder, note, usage)


def _draft_one(client: Any, config: LLMConfig, reminder: Reminder, payment_history: pd.DataFrame,
               breaker: _Breaker) -> Draft:
    if note := breaker.open_note():
        return _fallback(reminder, note)
    messages = build_messages(reminder, payment_history)
    try:
        response = client.chat.completions.create(
            model=config.model,
            messages=messages,
            response_format={"type": "json_object"},
            max_completion_tokens=MAX_COMPLETION_TOKENS,
        )
    except Exception as exc:
        note = _error_note(exc, config)
        breaker.failure(note)
        return _fallback(reminder, note)
    breaker.success()
    usage = getattr(response, "usage", None)
    tokens = (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
    paragraph, tone, problem = parse_reply(response)
    if problem is None:
        # The normalised text is what was judged, so it is what is stored and sent.
        verdict = judge(paragraph, reminder.locale, reminder.step)
        paragraph = verdict.text
        if verdict.refusal is not None:
            problem = f"rejected: {verdict.refusal}"
    if problem is not None:
        return _fallback(reminder, problem, tokens)
    return Draft(key=reminder.key, paragraph=paragraph, source="llm", tone=tone, note=None,
                 prompt_tokens=tokens[0], completion_tokens=tokens[1])


def draft_paragraphs(rows: pd.DataFrame, payment_history: pd.DataFrame,
                     config: LLMConfig | None) -> list[Draft]:
    """One Draft per row of `rows`, in the same order.

    `rows`: reserved dunning rows from `due_dunning_steps` (key, subject_id, step,
    locale, client_id, client_name, notes, number, amount, currency, issue_date,
    due_date). `payment_history`: see `payment_history_frame`. Rows whose step is
    not REMINDED_1/REMINDED_2 get an empty paragraph and no call. With `config`
    None nothing touches the network: every row gets its template paragraph.
    """
    items = reminders(rows)
    drafts: list[Draft | None] = [None] * len(items)
    to_call: list[int] = []
    for index, reminder in enumerate(items):
        if reminder.step not in DRAFTED_STEPS or config is None:
            drafts[index] = template_draft(reminder, OFF_NOTE)
        elif len(to_call) >= config.max_calls:
            drafts[index] = _fallback(reminder, f"LLM call budget of {config.max_calls} per run used up")
        else:
            to_call.append(index)

    if to_call and config is not None:
        _call_all(config, items, to_call, payment_history, drafts)
    return [draft for draft in drafts if draft is not None]


def _call_all(config: LLMConfig, items: list[Reminder], to_call: list[int],
              payment_history: pd.DataFrame, drafts: list[Draft | None]) -> None:
    """Fill drafts[i] for each i in to_call, with at most config.concurrency calls at once."""

    def fallback(index: int, note: str) -> Draft:
        return _fallback(items[index], note)

    try:
        from openai import OpenAI

        client = OpenAI(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout_s,
                        max_retries=0)  # a retry would double the wait; the template is the retry
    except Exception as exc:
        for index in to_call:
            drafts[index] = fallback(index, f"could not create the LLM client ({type(exc).__name__})")
        return
    breaker = _Breaker(config.max_consecutive_failures)
    with client, ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="dueflow-llm") as pool:
        futures = {index: pool.submit(_draft_one, client, config, items[index], payment_history, breaker)
                   for index in to_call}
        for index, future in futures.items():
            try:
                drafts[index] = future.result()
            except Exception as exc:  # bad data in one row must not stop the others (G6)
                drafts[index] = fallback(index, f"could not draft ({type(exc).__name__})")


