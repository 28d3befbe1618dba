"""The FastAPI application that serves search, description and arithmetic.

Built in a later issue on top of ``model/`` (encoders) and ``index/`` (vector stores).
"""
