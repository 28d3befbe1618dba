"""The FastAPI application that serves search, description and arithmetic.

A thin layer over ``model/runtime`` (the query's parse and encoders) and ``index/`` (the
gallery): ``app.create_app`` builds it over ``components.Components`` (loaded once), with
one object per capability (``capabilities/``) and one routes module per capability.
"""
