docker run -d --name rmqk -p 127.0.0.1:19092:19092 -p 127.0.0.1:9404:9404 \
    -v rmqk-data:/var/lib/rmqk rmqkafka:latest
until curl -sf localhost:9404/ready; do sleep 0.2; done    # prints "ready" (0.6 s after docker run)
rmqk topics create greetings -b localhost:19092
rmqk topics list -b localhost:19092     # greetings
docker stop rmqk                        # SIGTERM: flush, checkpoint, clean-shutdown marker
