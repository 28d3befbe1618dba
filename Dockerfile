# groundsearch: the search service on CPU, with the trained models baked in and its caches warm.
#
#   docker compose up --build                     # http://127.0.0.1:8000 (see docker-compose.yml)
#   docker build -t groundsearch .                # the image alone
#   docker run -p 8000:8000 -e GROUNDSEARCH_WRITE_TOKEN=... groundsearch   (token: 16+ chars,
#                                                 enables gallery writes; unset = read-only)
#
# Volumes: GROUNDSEARCH_INDEX_DIR (the gallery: its database, FAISS snapshots and uploaded photos) and
# GROUNDSEARCH_CACHE_DIR (rebuildable: GloVe pretrain, parse and feature caches). Optional
# read-only data at GROUNDSEARCH_DATA_DIR=/data: with /data/flickr8k the service serves the
# Flickr8k test gallery, without it the shipped sample gallery (15 photos); either is built
# into an empty index folder on the first start.
# Needs BuildKit (the default builder since Docker 23) for the RUN --mount steps.
FROM python:3.11-slim

# Where the CPU build of torch comes from. PyPI's torch 2.13.0 for Linux is the CUDA build
# (gigabytes of nvidia-* wheels), so torch is pinned to the local version 2.13.0+cpu, which
# only PyTorch's CPU index has: a build that cannot reach that index fails instead of
# pulling CUDA. An empty value leaves it to pip's own configuration (a mirror, or
# PIP_FIND_LINKS holding the wheel).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# 1. CPU torch first, in a layer of its own (the largest and most stable one): the wheel
#    alone from the CPU index, then its pure-Python dependencies from PyPI.
RUN pip install --no-deps ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch==2.13.0+cpu" \
 && pip install "torch==2.13.0+cpu" \
 && python -c "import torch; assert torch.version.cuda is None, torch.__version__; print('torch', torch.__version__)"

# 2. The project's dependencies (this layer changes only with pyproject.toml).
RUN --mount=type=bind,source=pyproject.toml,target=/tmp/pyproject.toml \
    python -c "import tomllib; print(*tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt \
 && python -c "import torch; assert torch.version.cuda is None, 'a CUDA torch replaced the CPU one'"

# 3. The project itself, installed (not editable) with the model artifacts as package data:
#    settings.model_dir resolves to site-packages/model/artifacts. The sources are
#    bind-mounted, so no copy of them (or of the 55 MB of artifacts) stays in a layer.
RUN --mount=type=bind,target=/src,rw \
    pip install --no-deps /src \
 && python -c "from groundsearch.common.settings import get_settings as g; s = g(); \
assert s.default_checkpoint.is_file(), s.default_checkpoint; \
assert s.default_decoder.is_file(), s.default_decoder; \
assert (s.parser_dir / 'depparse.pt').is_file(), s.parser_dir; print('model dir', s.model_dir)" \
 && GROUNDSEARCH_OBJECTS_DIR=/opt/groundsearch/object-detector groundsearch fetch-objects

# 4. A non-root user and the folders it writes.
ENV GROUNDSEARCH_DATA_DIR=/data \
    GROUNDSEARCH_OBJECTS_DIR=/opt/groundsearch/object-detector \
    GROUNDSEARCH_CACHE_DIR=/var/cache/groundsearch \
    GROUNDSEARCH_INDEX_DIR=/var/lib/groundsearch/index
RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin groundsearch \
 && mkdir -p "$GROUNDSEARCH_CACHE_DIR" "$GROUNDSEARCH_INDEX_DIR" "$GROUNDSEARCH_DATA_DIR" \
 && chown groundsearch:groundsearch "$GROUNDSEARCH_CACHE_DIR" "$GROUNDSEARCH_INDEX_DIR"
USER groundsearch
WORKDIR /home/groundsearch

# 5. Warm the caches as that user, so a container starts fast: the stanza GloVe pretrain
#    (~15 s to build), then the sample gallery's photos and caption parses (`groundsearch
#    index --sample`). The gallery itself is built into a scratch folder and dropped: the index folder stays
#    empty, so the first start builds the gallery from the warm caches in a few seconds,
#    and builds the Flickr8k test gallery instead when /data/flickr8k is mounted. (An empty
#    named volume starts as a copy of these folders, the warm cache included.)
RUN groundsearch parse "A dog runs on the beach." > /dev/null \
 && groundsearch index --sample --index /tmp/sample-gallery --quiet > /dev/null \
 && rm -rf /tmp/sample-gallery

VOLUME ["/var/cache/groundsearch", "/var/lib/groundsearch/index"]
EXPOSE 8000

# Healthy = serving: /ready answers 200 once the model and the gallery are loaded (~10 s
# after start here; /health, which answers as soon as the process does, stays the liveness
# route for probes that want it). The start period covers building the gallery on a first
# start: ~2 s for the sample gallery, ~2 min for Flickr8k's 1,000 test photos and their
# 5,000 captions (`groundsearch index --flickr8k`, cold parse cache: 116 s on 2 cores).
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/ready', timeout=4)"]

CMD ["groundsearch", "serve", "--host", "0.0.0.0", "--port", "8000"]
