"""groundsearch: find images from sentences and describe images with sentences."""

__version__ = "0.1.0"
