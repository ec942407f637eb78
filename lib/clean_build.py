"""setuptools' build backend, run on a copy of this folder: setuptools writes build/ and portcheck.egg-info/ into
the folder it builds in, so `pip install ./lib` builds (and prepares the metadata) in a temporary copy and leaves
the source folder as it was. An editable install (`pip install -e ./lib`) builds in place, as it must."""
import contextlib
import os
import shutil
import tempfile

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F401,F403 (every hook this module does not redefine)

LEFT_BEHIND = ("build", "*.egg-info", "__pycache__")  # an older in-place build's leftovers stay out of the copy


@contextlib.contextmanager
def _in_a_copy():
    source = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="portcheck-build-") as tmp:
        copy = os.path.join(tmp, "src")
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
        os.chdir(copy)
        try:
            yield
        finally:
            os.chdir(source)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = os.path.abspath(wheel_directory)
    metadata_directory = metadata_directory and os.path.abspath(metadata_directory)
    with _in_a_copy():
        return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    sdist_directory = os.path.abspath(sdist_directory)
    with _in_a_copy():
        return build_meta.build_sdist(sdist_directory, config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    metadata_directory = os.path.abspath(metadata_directory)
    with _in_a_copy():
        return build_meta.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def get_requires_for_build_wheel(config_settings=None):
    with _in_a_copy():  # setuptools answers by running egg_info, which writes portcheck.egg-info/ where it runs
        return build_meta.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _in_a_copy():
        return build_meta.get_requires_for_build_sdist(config_settings)
