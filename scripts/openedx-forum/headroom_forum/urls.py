"""The forum's API under /forum/ (api/v1/ and api/v2/), as the LMS mounts it."""

from django.urls import include, path

urlpatterns = [path("forum/", include("forum.urls"))]
