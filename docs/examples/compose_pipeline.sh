cd compose
docker-compose up --exit-code-from pipeline pipeline     # ... "check: OK"; exit code = the pipeline's
docker-compose down -v                                   # stop, drop the broker's data volume
