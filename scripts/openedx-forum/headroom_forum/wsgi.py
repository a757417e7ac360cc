import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "headroom_forum.settings")
application = get_wsgi_application()
