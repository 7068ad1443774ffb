"""dueflow: Prefect flows that send contract-renewal alerts and invoice reminders exactly once.

The repository's top-level folders are this package's subpackages, each under one import
name: `dueflow.flows`, `dueflow.tasks`, `dueflow.blocks`, `dueflow.deployments`,
`dueflow.sql`. This folder holds them as symbolic links (`flows -> ../flows`, ...), so that
Python, the installers and static tools (mypy, editors) find `dueflow.*` in the same
files. Each folder refuses its bare name (`import tasks`): that would load its modules a
second time, as other objects.
"""
