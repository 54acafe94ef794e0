"""What our shared objects export, read from the built files with binutils.

libsertrace.so must export exactly the functions its installed headers
declare (tracepoints/include/sertrace/*.h), each under the SERTRACE_0
version node, and nothing else: no formatter, buffer, line-writer or
sertrace_internal_* symbol, none of what LTTng-UST's headers define (the
provider registers itself from the library's constructor).  The babeltrace2
plugin must export only the eight __bt_get_*_section_* functions that
babeltrace2 looks up; the Python extension modules only their PyInit_*.

Neither library may call its own functions through the PLT: that is what
-Wl,-Bsymbolic(-functions) used to prevent, and what hidden visibility and
the version scripts now give (an internal call bound through the PLT would
show as a JUMP_SLOT relocation against one of our symbols).

meson passes the paths (tests/build/meson.build): SERTRACE_LIB,
SERTRACE_PLUGIN, SERTRACE_HEADERS (colon-separated), SERTRACE_EXTENSIONS
(colon-separated).
"""
import os
import re
import subprocess

import pytest

LIB = os.environ.get("SERTRACE_LIB", "")
PLUGIN = os.environ.get("SERTRACE_PLUGIN", "")
HEADERS = [h for h in os.environ.get("SERTRACE_HEADERS", "").split(":") if h]
EXTENSIONS = [e for e in os.environ.get("SERTRACE_EXTENSIONS", "").split(":") if e]

PLUGIN_EXPORTS = {
    "__bt_get_%s_section_%s" % (end, what)
    for end in ("begin", "end")
    for what in (
        "plugin_descriptors",
        "plugin_descriptor_attributes",
        "component_class_descriptors",
        "component_class_descriptor_attributes",
    )
}

if not (LIB and PLUGIN and HEADERS):
    pytest.skip("run through meson test (SERTRACE_LIB, SERTRACE_PLUGIN, SERTRACE_HEADERS unset)",
                allow_module_level=True)


def exported(path):
    """{name: version or ''} of the functions and data `path` defines in
    its dynamic symbol table (version node names, type A, left out)."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] == "A":
            continue
        name, _, version = parts[2].partition("@@")
        if not version:
            name, _, version = name.partition("@")
        syms[name] = version
    return syms


def plt_calls_to_own_symbols(path, own):
    """Names in `own` that `path` calls through a PLT slot (JUMP_SLOT)."""
    out = subprocess.run(["readelf", "-rW", path], check=True,
                         capture_output=True, text=True).stdout
    called = set()
    for line in out.splitlines():
        if "JUMP_SLOT" not in line:
            continue
        name = line.split()[-3] if line.split()[-2] == "+" else line.split()[-1]
        called.add(name.split("@")[0])
    return sorted(called & own)


def header_functions(paths):
    """Functions declared in the headers: `type name(` at the start of a
    line (the headers' one-declaration-per-line style), comments removed."""
    names = set()
    for p in paths:
        text = open(p).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(r"^[A-Za-z_][\w \t\*]*?\b(sertrace_\w+)\s*\(", text, re.M):
            if not m.group(0).lstrip().startswith(("#", "typedef", "static")):
                names.add(m.group(1))
    return names


def test_header_parser_finds_the_api():
    # The expected list comes from the headers: make sure it is not empty
    # or missing the functions every serializer calls.
    names = header_functions(HEADERS)
    assert {"sertrace_dump_begin", "sertrace_dump_end", "sertrace_enter",
            "sertrace_exit", "sertrace_type"} <= names, names


def test_libsertrace_exports_exactly_its_api():
    api = header_functions(HEADERS)
    syms = exported(LIB)
    unexpected = sorted(set(syms) - api)
    missing = sorted(api - set(syms))
    assert not unexpected, (
        "libsertrace exports symbols its installed headers do not declare: %s "
        "(give them hidden visibility: static, or declared outside sertrace.h)" % unexpected)
    assert not missing, (
        "functions declared in sertrace.h are not exported: %s (declare them between the "
        "header's '#pragma GCC visibility push(default)' and its pop)" % missing)
    unversioned = sorted(n for n, v in syms.items() if v != "SERTRACE_0")
    assert not unversioned, "not under the SERTRACE_0 version node: %s" % unversioned


def test_plugin_exports_only_what_babeltrace2_loads():
    syms = set(exported(PLUGIN))
    assert syms == PLUGIN_EXPORTS, (
        "unexpected: %s; missing: %s" % (sorted(syms - PLUGIN_EXPORTS),
                                         sorted(PLUGIN_EXPORTS - syms)))


@pytest.mark.parametrize("ext", EXTENSIONS or [pytest.param("", marks=pytest.mark.skip(
    reason="no extension module given"))], ids=os.path.basename)
def test_extension_exports_only_its_init(ext):
    syms = set(exported(ext))
    assert len(syms) == 1 and next(iter(syms)).startswith("PyInit_"), sorted(syms)


def test_no_plt_calls_to_our_own_functions():
    for path in (LIB, PLUGIN):
        out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True)
        # Without a static symbol table (stripped), the dynamic one is all we know.
        lines = (out.stdout if out.returncode == 0 and out.stdout else
                 subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                                capture_output=True, text=True).stdout).splitlines()
        own = {l.split()[2].split("@")[0] for l in lines
               if len(l.split()) >= 3 and l.split()[1] in "TtWw"}
        assert own, path
        bad = plt_calls_to_own_symbols(path, own)
        assert not bad, "%s calls its own functions through the PLT: %s" % (path, bad)
