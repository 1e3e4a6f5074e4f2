# noti's image: the worker, beat, Flower, `noti` and `noti serve` all run from it
# (docker-compose.yml).
# The settings file is mounted at run time (NOTI_CONFIG), never baked in.
FROM python:3.11.11-slim-bookworm
WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY noti ./noti
RUN pip install --no-cache-dir ".[flower,http,fast]" && useradd --create-home noti
USER noti
CMD ["celery", "-A", "noti", "worker", "-l", "INFO"]
