"""The FastAPI application that serves search, description and arithmetic: ``http.app``
over ``core.components`` (loaded once), one capability object and routes module each."""
