"""The COCO object detector, measured as relevance evidence and not shipped
(docs/RESULTS.md, "An object detector's evidence"): ``objects.py`` (the detector and
``fetch``, which installs it), ``tfjs_graph.py`` (the TensorFlow.js graph runner it runs
on), ``evidence.py`` (its kinds beside a photo's ImageNet classes, with the noun → kinds
table ``noun_objects.tsv``) and ``relevance.py`` (the relevance commands' splits with
it). Nothing under model/, index/, service/ or groundsearch/ imports it. Bench scripts
import it as ``detector.…`` with bench/ on ``sys.path``, as they import ``common``;
``python bench/object_detector.py`` installs it and fits and measures relevance with it.
"""
