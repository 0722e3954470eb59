"""Run moto's DynamoDB on one thread: python3 .ci/moto_serial.py PORT

moto_server serves requests on many threads, and its TransactWriteItems is
not atomic among them: a transaction that fails restores a copy of the whole
table taken when it started, undoing any transaction that succeeded in the
meantime. DynamoDB serializes transactions on an item; serving one request at
a time gives moto the same guarantee, so concurrency tests mean something.
"""
import sys

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)
