if __name__ != "dueflow.tasks":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.tasks, not {__name__}: one import name per module")
