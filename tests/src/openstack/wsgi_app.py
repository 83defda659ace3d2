"""gunicorn entry point for an OpenStack WSGI module named by $WSGI_MODULE.

keystone and nova parse sys.argv with oslo.config when their application is built, and would
read gunicorn's own arguments as theirs, so the arguments are cleared before the import.
"""
import importlib
import os
import sys

sys.argv = sys.argv[:1]
application = importlib.import_module(os.environ["WSGI_MODULE"]).application
