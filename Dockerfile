FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY noti ./noti
COPY config ./config
RUN pip install --no-cache-dir ".[flower]" && useradd --create-home noti
USER noti
CMD ["celery", "-A", "noti", "worker", "-l", "INFO"]
