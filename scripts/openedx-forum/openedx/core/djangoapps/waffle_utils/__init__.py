"""A stand-in for edx-platform's openedx.core.djangoapps.waffle_utils.

The forum imports CourseWaffleFlag from edx-platform (forum/toggles.py: the AI
moderation flags from 0.5; the MySQL backend's flag before it), which a forum
served on its own does not have. Every flag answers what FORUM_WAFFLE_FLAGS in
the settings says, off unless named there.
"""

from django.conf import settings


class CourseWaffleFlag:
    """A flag by name, on when settings.FORUM_WAFFLE_FLAGS names it."""

    def __init__(self, name, module_name=None, log_prefix=""):
        self.name = name
        self.module_name = module_name

    def is_enabled(self, course_key=None):
        return self.name in getattr(settings, "FORUM_WAFFLE_FLAGS", ())

    def is_enabled_without_course_context(self):
        return self.is_enabled()


WaffleFlag = CourseWaffleFlag
