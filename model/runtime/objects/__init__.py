"""The COCO object detector (``detector``, run by ``graph``) and its evidence for a
query's nouns (``nouns``): the short-query fusion's third channel (``model.runtime.fusion``)."""
