"""Datasets laid out like Flickr8k: a captions file, an image folder, split lists."""

from groundsearch.model.data.flickr import (
    CaptionedImages,
    DatasetError,
    load_captioned_images,
    read_caption_ids,
)

__all__ = ["CaptionedImages", "DatasetError", "load_captioned_images", "read_caption_ids"]
