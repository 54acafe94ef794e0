"""Describe a CPython interpreter for the build (run by the root meson.build).

Debian 12's meson 1.0 cannot use its python module for CPython 3.12 and
later (the module's introspection imports distutils, which 3.12 removed), so
the build asks the interpreter itself, through sysconfig, for what an
extension module needs: its version, C header directories, extension
filename suffix, and the directory where the package is installed so that
this interpreter finds it.  Usage:

    python probe_python.py PREFIX

prints one `key=value` line per fact (values never contain newlines); the
build parses them.  It exits with status 1 and a message on stderr if the
interpreter is not one the build supports.
"""

import os
import sys
import sysconfig


def install_dir(prefix):
    """Where `meson install` puts the package for this interpreter.

    Debian's CPython (its sysconfig has the 'deb_system' scheme) searches
    <prefix>/lib/python3.X/dist-packages for prefix /usr/local: that stays
    the directory, as it always was.  Any other CPython (pyenv, a source
    build) gets its site-packages under PREFIX if it searches that, else its
    own site-packages (sysconfig's platlib), so that the installed package
    is importable by the interpreter it was built for.
    """
    version = "%d.%d" % sys.version_info[:2]
    if "deb_system" in sysconfig.get_scheme_names():
        return os.path.join(prefix, "lib", "python" + version, "dist-packages"), "debian"
    under_prefix = sysconfig.get_path("platlib", vars={"base": prefix, "platbase": prefix})
    searched = {os.path.realpath(p) for p in sys.path if p}
    if os.path.realpath(under_prefix) in searched:
        return under_prefix, "prefix"
    return sysconfig.get_path("platlib"), "interpreter"


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: probe_python.py PREFIX\n")
        return 2
    if sys.implementation.name != "cpython":
        sys.stderr.write("it is %s, not CPython: sertrace's extension needs CPython 3.11-3.13\n"
                         % sys.implementation.name)
        return 1
    if sys.version_info < (3, 11):
        sys.stderr.write("it is Python %d.%d: sertrace needs CPython 3.11 or later "
                         "(pass -Dpython=/usr/bin/python3 for Debian's)\n"
                         % sys.version_info[:2])
        return 1
    includes = []
    for d in (sysconfig.get_path("include"), sysconfig.get_path("platinclude"),
              sysconfig.get_config_var("INCLUDEPY"), sysconfig.get_config_var("CONFINCLUDEPY")):
        if d and d not in includes:
            includes.append(d)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not suffix or not suffix.startswith(".") or suffix.count(".") < 2:
        sys.stderr.write("it reports extension suffix %r: cannot name the extension module\n"
                         % (suffix,))
        return 1
    where, why = install_dir(sys.argv[1])
    facts = {
        "version": "%d.%d" % sys.version_info[:2],
        "full_version": "%d.%d.%d" % sys.version_info[:3],
        "hexversion": "0x%08x" % sys.hexversion,
        "executable": sys.executable,
        # The include directories, ':'-separated (POSIX paths).
        "include_dirs": ":".join(includes),
        # '.cpython-312-x86_64-linux-gnu.so' -> name suffix without the dot.
        "ext_suffix": suffix[1:],
        "install_dir": where,
        "install_dir_why": why,
    }
    for key, value in facts.items():
        if "\n" in value:
            sys.stderr.write("%s: %s contains a newline\n" % (key, value))
            return 1
        print("%s=%s" % (key, value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
