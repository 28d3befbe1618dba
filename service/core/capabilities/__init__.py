"""What the service does, one small object per capability over the shared
``service.core.components``, built once by ``components.Capabilities``."""
