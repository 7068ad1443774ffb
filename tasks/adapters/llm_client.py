"""The model (G7): asks an OpenAI-compatible endpoint, through the official `openai` client,
for the tone plan of each REMINDED_1/REMINDED_2 a night reserved — a strict JSON schema of
enums (core.llm_guard) — bounded: a timeout per call, a number of calls in flight, a budget
per run, and a breaker that stops calling after repeated API failures. Whatever goes wrong
gives the reminder dueflow's own plan, with the reason; asking never raises for one row.
`openai` is imported only when a model is configured.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import Any

from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.llm_guard import (
    ModelAnswer,
    Refused,
    Reminder,
    answer_of,
    build_messages,
    client_history,
    drafts_of,
    histories_by_client,
    menu_for,
    read_reply,
    reminders_of,
    response_format,
)
from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, Phrasebook
from dueflow.tasks.core.tone import Draft, Fallback, plan_reminders

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
            return f"{self._failures} API failures in a row, the last: {self._last}"


def _error_note(exc: Exception, config: LLMConfig) -> str:
    """One short line, no secrets, no stack trace. Timeout first: it is a connection error."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return f"timed out after {config.timeout_s:g} s"
    if isinstance(exc, openai.APIConnectionError):
        return "unreachable (connection error)"
    if isinstance(exc, openai.RateLimitError):
        return "rate limit: HTTP 429"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return f"call failed ({type(exc).__name__})"


def _ask_one(client: Any, config: LLMConfig, reminder: Reminder, history: pd.DataFrame, book: Phrasebook,
             breaker: _Breaker) -> ModelAnswer:
    if note := breaker.open_note():
        return ModelAnswer(refused=Refused(Fallback.BREAKER, note))
    menu = menu_for(reminder, book)
    messages = build_messages(reminder, history, menu)  # bad data raises here, not as an API failure
    try:
        response = client.chat.completions.create(
            model=config.model,
            messages=messages,
            response_format=response_format(menu),
            max_completion_tokens=MAX_COMPLETION_TOKENS,
        )
    except Exception as exc:
        note = _error_note(exc, config)
        breaker.failure(note)
        return ModelAnswer(refused=Refused(Fallback.API_ERROR, note))
    breaker.success()
    usage = getattr(response, "usage", None)
    tokens = (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
    answer = answer_of(read_reply(response), menu, tokens)
    if answer.refused is not None:
        log.info("tone plan for %s: the model's answer was refused (%s)", reminder.key,
                 answer.refused.fallback.value)
    return answer


def ask_for_plans(reminders: Sequence[Reminder], histories: Mapping[str, pd.DataFrame], book: Phrasebook,
                  config: LLMConfig) -> dict[str, ModelAnswer]:
    """The model's answer for each reminder, by key, `config.concurrency` calls at once.
    `histories`: the payment history by client (llm_guard.histories_by_client)."""
    answers: dict[str, ModelAnswer] = {}
    asked = list(reminders)
    if not asked:
        return answers
    try:
        from openai import OpenAI

        client = OpenAI(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout_s,
                        max_retries=0)  # a retry would double the wait; the rule is the retry
    except Exception as exc:
        note = f"could not create the client ({type(exc).__name__})"
        return answers | {r.key: ModelAnswer(refused=Refused(Fallback.API_ERROR, note)) for r in asked}
    breaker = _Breaker(config.max_consecutive_failures)
    with client, ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="dueflow-llm") as pool:
        futures = {r.key: pool.submit(_ask_one, client, config, r, client_history(r, histories), book,
                                      breaker) for r in asked}
        for key, future in futures.items():
            try:
                answers[key] = future.result()
            except Exception as exc:  # bad data in one row must not stop the others (G6)
                note = f"could not ask ({type(exc).__name__})"
                answers[key] = ModelAnswer(refused=Refused(Fallback.API_ERROR, note))
    return answers


def plan_paragraphs(rows: pd.DataFrame, history: pd.DataFrame, as_of: date, book: Phrasebook,
                    config: LLMConfig | None, ask_model: bool = True) -> list[Draft]:
    """One Draft per REMINDED_1/2 of `rows`, in order (G7): dueflow's plan from the client's
    payment history (`history`: core.tone.payment_history_frame), and the model's where
    `config` names one, `ask_model` allows it and its answer is a valid plan. With `config`
    None nothing touches the network."""
    reminders = rows[rows["step"].isin(DRAFTED_STEPS)]
    if reminders.empty:
        return []
    plans = plan_reminders(reminders, history, as_of, book)
    answers = {}
    if config is not None and ask_model:
        # At most `max_calls` a night; the rest say the budget was used up.
        asked = reminders.iloc[:config.max_calls]
        answers = ask_for_plans(reminders_of(asked, plans), histories_by_client(history), book, config)
        over = Refused(Fallback.BUDGET, f"{config.max_calls} calls a night")
        answers |= {str(key): ModelAnswer(refused=over) for key in reminders["key"].iloc[config.max_calls:]}
    unasked = Fallback.MODEL_OFF if config is None else Fallback.RENDERED_AGAIN
    return drafts_of(reminders, plans, book, answers, unasked)
