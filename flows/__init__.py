if __name__ != "dueflow.flows":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.flows, not {__name__}: one import name per module")
