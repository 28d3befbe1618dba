"""What the service does, one small object per capability (search, photos, describe,
arithmetic, explain, gallery writes, status) over the shared ``service.core.components``;
``components.Capabilities`` builds them once, and each route gets its own through
``service.http.deps``."""
