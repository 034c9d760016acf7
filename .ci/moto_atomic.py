"""moto's S3 server, applying one request at a time.

moto checks If-None-Match / If-Match and then writes without holding a lock, so under load
two racing conditional PUTs can both succeed, where real S3 decides them atomically (seen
here: `conditional_write_races_have_one_winner_on_s3` found two create-if-absent winners).
Bough's fencing tests need the atomic behaviour, so this launcher serializes requests.

usage: python moto_atomic.py HOST PORT
"""

import sys
import threading

from werkzeug.serving import run_simple

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        with lock:
            # Materialized inside the lock: the request's whole effect happens under it.
            return list(app(environ, start_response))

    run_simple(host, port, serialized, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
