if __name__ != "dueflow.deployments":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.deployments, not {__name__}: one import name per module")
