"""The host project of a forum served on its own, for load tests on loopback.

The forum (PyPI openedx-forum, Django app `forum`) is a plugin of edx-platform's
LMS; this is the least Django project that serves its HTTP API: the forum, DRF
and DRF's tokens, MySQL (MariaDB) from the environment scripts/openedx-forum.sh
sets, a search backend that indexes nothing (headroom_forum.nosearch) and
django-prometheus's request timings (multiprocess: gunicorn's workers write,
gunicorn.conf.py serves them). Not a server for people: DEBUG off, but the
secret key and the service token are made per directory by the script.
"""

import os

SECRET_KEY = os.environ["FORUM_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True  # the forum's MySQL models need it
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_prometheus",
    "rest_framework",
    "rest_framework.authtoken",
    "forum",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "headroom_forum.urls"
WSGI_APPLICATION = "headroom_forum.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": "forum",
        "USER": "forum",
        "PASSWORD": os.environ["FORUM_DB_PASSWORD"],
        "HOST": "127.0.0.1",
        "PORT": os.environ["FORUM_DB_PORT"],
        "OPTIONS": {"charset": "utf8mb4"},
        "CONN_MAX_AGE": 60,  # as a deployment keeps its connections; 0 would measure connecting
    }
}

# The caller is a service with a DRF token (forum.permissions.IsForumServiceUser
# from 0.5: a staff account); releases before 0.5 took any caller, and some
# the X-Edx-Api-Key header, which FORUM_API_KEY answers.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}
API_KEY = FORUM_API_KEY = os.environ["FORUM_API_KEY"]

FORUM_ENABLE_HTTP_API = True  # from 0.5 the HTTP API is off unless a setting turns it on
FORUM_SEARCH_BACKEND = "headroom_forum.nosearch.NoSearch"
FORUM_MONGODB_DATABASE = "unused"
FORUM_MONGODB_CLIENT_PARAMETERS = {}
# The waffle flags the stand-in (openedx/core/djangoapps/waffle_utils) answers on:
# before 0.5 the MySQL backend is chosen per course by a flag.
FORUM_WAFFLE_FLAGS = ("forum_v2.enable_mysql_backend",)
FEATURES = {"ENABLE_DISCUSSION_SERVICE": True}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
