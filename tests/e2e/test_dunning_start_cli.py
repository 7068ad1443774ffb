"""`dueflow run --dry-run` on the issue's tables (issue 38): it counts the reminders that would
go before their invoice's due date and says how to count from the due date; `--dunning-start
due` (or DUEFLOW_DUNNING_START) does, and the flag wins over the variable for its run."""

from __future__ import annotations

from tests.helpers.company_schema import AS_OF, BEFORE_DUE, DUE_BY_START, MAPPING, RENEWALS, create_company

EARLY = f"Warning: {BEFORE_DUE} reminder(s) would go out before their invoice's due date (counted from"


def would_send(stdout: str) -> set[str]:
    return {word for line in stdout.splitlines() if "would send" in line
            for word in line.split() if word.startswith(("dunning/", "renewal/"))}


def test_the_dry_run_counts_the_early_reminders_and_the_flag_wins_for_its_run(
        sqlite_url, dueflow_cli, mail_env, tmp_path):
    create_company(sqlite_url)
    mapping = tmp_path / "sources.toml"
    mapping.write_text(MAPPING, encoding="utf-8")
    env = mail_env | {"DUEFLOW_DATABASE_URL": sqlite_url, "DUEFLOW_SOURCES_FILE": str(mapping),
                      "DUEFLOW_ESCALATION_TO": "collections@ours.example"}
    assert dueflow_cli("init-db", env=env).returncode == 0
    by_sent = dueflow_cli("run", "--dry-run", "--as-of", AS_OF.isoformat(), env=env)
    assert by_sent.returncode == 0, by_sent.stdout + by_sent.stderr
    assert would_send(by_sent.stdout) == RENEWALS | DUE_BY_START["sent"]
    early = [line for line in by_sent.stdout.splitlines() if line.startswith(EARLY)]
    assert len(early) == 1 and "`dueflow run --dunning-start due`, counts from the due date" in early[0]
    by_due = dueflow_cli("run", "--dry-run", "--dunning-start", "due", "--as-of", AS_OF.isoformat(), env=env)
    assert would_send(by_due.stdout) == RENEWALS | DUE_BY_START["due"]
    assert "before their invoice's due date" not in by_due.stdout
    flag_wins = dueflow_cli("run", "--dry-run", "--dunning-start", "sent", "--as-of", AS_OF.isoformat(),
                            env=env | {"DUEFLOW_DUNNING_START": "due"})
    assert would_send(flag_wins.stdout) == RENEWALS | DUE_BY_START["sent"]
