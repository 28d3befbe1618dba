"""Vector stores over the embedded gallery (FAISS inner-product indexes).

Built in a later issue: build, persist, load, add, remove and search embedded images
and captions. The folder exists now so the layout shows the data flow
``model/ → index/ → service/``.
"""
