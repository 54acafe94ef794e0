/* names.c -- objects pickled by name: classes, functions, and whatever a
 * __reduce__ names with a str.
 *
 * A global is written as "import module, then follow the dotted name"
 * (pickletools: GLOBAL, STACK_GLOBAL; PEP 3154 for qualified names), so
 * before anything is written the name must be shown to lead back to the
 * very object being pickled.  The steps, as observed on the reference
 * pickler (its messages are reproduced exactly, tests/pickle):
 *   1. the name: the str given by __reduce__, else __qualname__, else
 *      __name__; a "<locals>" part is refused ("Can't pickle local object");
 *   2. the module: __module__ unless absent or None, else the first entry
 *      of a snapshot of sys.modules (except __main__) where the dotted name
 *      resolves to the object, else "__main__";
 *   3. import it and follow the name: failures are PicklingErrors naming
 *      the import, the attribute lookup, or the object found instead;
 *   4. protocol >= 2: a (module, name) pair registered with
 *      copyreg.add_extension is written as an EXT code (not memoized);
 *   5. otherwise STACK_GLOBAL (protocol >= 4; the last part alone when
 *      the name is not nested), GLOBAL lines (protocols 0-3; with
 *      fix_imports below protocol 3 the names are mapped back through
 *      _compat_pickle's REVERSE_NAME_MAPPING / REVERSE_IMPORT_MAPPING), or,
 *      for a nested name below protocol 4, a reduce to
 *      getattr(parent, last_part); then the object is memoized.
 */
#include "pickler.h"

int lookup_attr(PyObject *obj, PyObject *name, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13's public name for it.  Not PyObject_GetAttr + clear: since 3.10
     * that records name and obj on the AttributeError a user __getattr__
     * raises, an object the graph may hold (3.12 pickles them). */
    return PyObject_GetOptionalAttr(obj, name, out);
#elif PY_VERSION_HEX >= 0x030B0000
    /* No AttributeError created and cleared when the type's getattr is
     * the generic one (reducer_override is looked up on every dump). */
    return _PyObject_LookupAttr(obj, name, out);
#else
    *out = PyObject_GetAttr(obj, name);
    if (*out != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    return 0;
#endif
}

/* What a global resolves to; every field a strong reference or NULL. */
typedef struct global_ref {
    PyObject *name;        /* the dotted name, e.g. "Outer.Inner" */
    PyObject *parts;       /* list of its parts */
    PyObject *module_name; /* usually a str */
    PyObject *module;
    PyObject *parent; /* the object the last part is read from */
} global_ref;

static void global_ref_clear(global_ref *g)
{
    Py_CLEAR(g->name);
    Py_CLEAR(g->parts);
    Py_CLEAR(g->module_name);
    Py_CLEAR(g->module);
    Py_CLEAR(g->parent);
}

static PyObject *last_part(const global_ref *g)
{
    return PyList_GET_ITEM(g->parts, PyList_GET_SIZE(g->parts) - 1);
}

/* Follow `parts` from `root`: the object reached (new reference), or NULL
 * when a part is missing (no exception) or its lookup raised (exception
 * set).  *parent_out (optional) gets the object the last part was read
 * from. */
static PyObject *follow_parts(PyObject *root, PyObject *parts, PyObject **parent_out)
{
    PyObject *here = Py_NewRef(root), *from = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts) && here != NULL; i++) {
        Py_XSETREF(from, here);
        if (lookup_attr(from, PyList_GET_ITEM(parts, i), &here) <= 0)
            here = NULL;
    }
    if (here != NULL && parent_out != NULL)
        *parent_out = Py_XNewRef(from);
    Py_XDECREF(from);
    return here;
}

/* Step 2: the name of the module obj lives in (new reference). */
static PyObject *module_name_of(PyObject *obj, PyObject *parts)
{
    PyObject *declared;
    if (lookup_attr(obj, G.s_module, &declared) < 0)
        return NULL;
    if (declared != NULL && declared != Py_None)
        return declared;
    Py_XDECREF(declared);

    PyObject *modules = PySys_GetObject("modules"); /* borrowed */
    if (modules == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "unable to get sys.modules");
        return NULL;
    }
    /* A snapshot: following a name may import, and grow sys.modules. */
    PyObject *entries = PyDict_Check(modules) ? PyDict_Items(modules) : PyMapping_Items(modules);
    if (entries == NULL)
        return NULL;
    PyObject *found = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries) && found == NULL; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        PyObject *candidate_name = PyTuple_GET_ITEM(entry, 0);
        PyObject *candidate = PyTuple_GET_ITEM(entry, 1);
        if (candidate == Py_None ||
            (PyUnicode_Check(candidate_name) && PyUnicode_Compare(candidate_name, G.s_main) == 0))
            continue;
        PyObject *reached = follow_parts(candidate, parts, NULL);
        if (reached == NULL && PyErr_Occurred()) {
            Py_DECREF(entries);
            return NULL;
        }
        if (reached == obj)
            found = Py_NewRef(candidate_name);
        Py_XDECREF(reached);
    }
    Py_DECREF(entries);
    return found != NULL ? found : Py_NewRef(G.s_main);
}

/* Steps 1-3. */
static int resolve_global(PyObject *obj, PyObject *given_name, global_ref *g)
{
    if (given_name != NULL) {
        g->name = Py_NewRef(given_name);
    } else {
        if (lookup_attr(obj, G.s_qualname, &g->name) < 0)
            return -1;
        if (g->name == NULL && (g->name = PyObject_GetAttr(obj, G.s_name)) == NULL)
            return -1;
    }
    g->parts = PyUnicode_Split(g->name, G.s_dot, -1);
    if (g->parts == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(g->parts); i++) {
        if (PyUnicode_Compare(PyList_GET_ITEM(g->parts, i), G.s_locals) == 0) {
#if PY_VERSION_HEX >= 0x030D0000
            PyErr_Format(PyExc_AttributeError, "Can't get local object %R", g->name);
#else
            PyErr_Format(PyExc_AttributeError, "Can't pickle local object %R", g->name);
#endif
            return -1;
        }
    }
    g->module_name = module_name_of(obj, g->parts);
    if (g->module_name == NULL)
        return -1;
    g->module = PyImport_Import(g->module_name);
    if (g->module == NULL) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: import of module %R failed", obj,
                     g->module_name);
        return -1;
    }
    PyObject *reached = follow_parts(g->module, g->parts, &g->parent);
    if (reached == NULL) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: attribute lookup %S on %S failed", obj,
                     g->name, g->module_name);
        return -1;
    }
    Py_DECREF(reached);
    if (reached != obj) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: it's not the same object as %S.%S", obj,
                     g->module_name, g->name);
        return -1;
    }
    return 0;
}

static int write_ext_code(pickler *p, void *code)
{
    return emit_ext(p, *(long *)code);
}

/* Step 4: 1 written as an extension code, 0 not registered, -1 error. */
static int save_extension(pickler *p, PyObject *obj, const global_ref *g)
{
    PyObject *key = PyTuple_Pack(2, g->module_name, g->name);
    if (key == NULL)
        return -1;
    PyObject *code_obj = PyDict_GetItemWithError(G.extension_registry, key);
    Py_DECREF(key);
    if (code_obj == NULL)
        return PyErr_Occurred() ? -1 : 0;
#if PY_VERSION_HEX >= 0x030D0000
    /* 3.13: a code that is not an int raises what int conversion raises
     * (TypeError), one out of range RuntimeError, without the object. */
    long code = PyLong_AsLong(code_obj);
    if (code == -1 && PyErr_Occurred())
        return -1;
    if (code <= 0 || code > 0x7fffffffL) {
        PyErr_Format(PyExc_RuntimeError, "extension code %ld is out of range", code);
        return -1;
    }
#else
    if (!PyLong_Check(code_obj)) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: extension code %R isn't an integer", obj,
                     code_obj);
        return -1;
    }
    long code = PyLong_AsLong(code_obj);
    if (code == -1 && PyErr_Occurred())
        return -1;
    if (code <= 0 || code > 0x7fffffffL) {
        PyErr_Format(G.PicklingError, "Can't pickle %R: extension code %ld is out of range", obj,
                     code);
        return -1;
    }
#endif
    return save_part(p, PART_EXT, obj, write_ext_code, &code) < 0 ? -1 : 1;
}

/* fix_imports: _compat_pickle's two reverse tables, and what their values
 * must be (a RuntimeError names the table otherwise). */
typedef struct compat_table {
    PyObject **table;
    const char *name;
    int holds_pairs; /* (module, name) pairs; else module names */
} compat_table;

static const compat_table RENAMED_GLOBALS = {&G.name_mapping_3to2, "REVERSE_NAME_MAPPING", 1};
static const compat_table RENAMED_MODULES = {&G.import_mapping_3to2, "REVERSE_IMPORT_MAPPING", 0};

/* table[key] once checked: a new reference, or NULL (absent, or an
 * exception is set). */
static PyObject *compat_lookup(const compat_table *t, PyObject *key)
{
    PyObject *value = PyDict_GetItemWithError(*t->table, key);
    if (value == NULL)
        return NULL;
    if (!t->holds_pairs) {
        if (PyUnicode_Check(value))
            return Py_NewRef(value);
        PyErr_Format(PyExc_RuntimeError, "_compat_pickle.%s values should be strings, not %.200s",
                     t->name, Py_TYPE(value)->tp_name);
    } else if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
        PyErr_Format(PyExc_RuntimeError, "_compat_pickle.%s values should be 2-tuples, not %.200s",
                     t->name, Py_TYPE(value)->tp_name);
    } else {
        PyTypeObject *first = Py_TYPE(PyTuple_GET_ITEM(value, 0));
        PyTypeObject *second = Py_TYPE(PyTuple_GET_ITEM(value, 1));
        if (PyType_FastSubclass(first, Py_TPFLAGS_UNICODE_SUBCLASS) &&
            PyType_FastSubclass(second, Py_TPFLAGS_UNICODE_SUBCLASS))
            return Py_NewRef(value);
        PyErr_Format(PyExc_RuntimeError,
                     "_compat_pickle.%s values should be pairs of str, not (%.200s, %.200s)",
                     t->name, first->tp_name, second->tp_name);
    }
    return NULL;
}

/* The (module, name) of a protocol 0-2 GLOBAL, as Python 2 spells it: a
 * renamed global first, else a renamed module (new references replace
 * *module and *name). */
static int map_to_python2(PyObject **module, PyObject **name)
{
    PyObject *key = PyTuple_Pack(2, *module, *name);
    if (key == NULL)
        return -1;
    PyObject *pair = compat_lookup(&RENAMED_GLOBALS, key);
    Py_DECREF(key);
    if (pair != NULL) {
        Py_SETREF(*module, Py_NewRef(PyTuple_GET_ITEM(pair, 0)));
        Py_SETREF(*name, Py_NewRef(PyTuple_GET_ITEM(pair, 1)));
        Py_DECREF(pair);
        return 0;
    }
    PyObject *renamed = PyErr_Occurred() ? NULL : compat_lookup(&RENAMED_MODULES, *module);
    if (renamed != NULL)
        Py_SETREF(*module, renamed);
    return PyErr_Occurred() ? -1 : 0;
}

/* GLOBAL module\nname\n, protocols 0-3. */
static int write_global_lines(pickler *p, PyObject *module_name, PyObject *name)
{
    PyObject *module_text = Py_NewRef(module_name), *name_text = Py_NewRef(name);
    int status = output_write_byte(p, OP_GLOBAL);
    if (status == 0 && p->fix_imports)
        status = map_to_python2(&module_text, &name_text);
    if (status == 0)
        status = emit_name_line(p, module_text, "module");
    if (status == 0)
        status = emit_name_line(p, name_text, "global");
    Py_DECREF(module_text);
    Py_DECREF(name_text);
    return status;
}

#if PY_VERSION_HEX >= 0x030D0000
/* CPython 3.13, protocols 0-3, a nested name module.A.B.C: the reference
 * pickler writes getattr(getattr(A, 'B'), 'C'), where `getattr` is saved as
 * any object (memoized), A is a GLOBAL written afresh (neither memoized nor
 * looked up in the memo, so a class reachable from itself does not
 * recurse), each further part is saved as any str, and neither the
 * argument tuples nor the intermediate results are memoized (the caller
 * memoizes the final object).  Learned from the bytes 3.13's pickle writes
 * (tests/cpython: test_pickle's test_recursive_nested_names2; the
 * differential corpus of tests/pickle).  Written outside in: every
 * `getattr (` first, then A, then each part closing one call. */
static int write_getattr_chain(pickler *p, const global_ref *g)
{
    Py_ssize_t parts = PyList_GET_SIZE(g->parts);
    /* Protocols 0-1 have no TUPLE2: MARK ... TUPLE. */
    const char close[2] = {p->proto >= 2 ? (char)OP_TUPLE2 : (char)OP_TUPLE, (char)OP_REDUCE};
    for (Py_ssize_t i = 1; i < parts; i++) {
        if (save_child_of(p, G.getattr, EDGE_PLAIN, NULL) < 0 ||
            (p->proto < 2 && output_write_byte(p, OP_MARK) < 0))
            return -1;
    }
    if (write_global_lines(p, g->module_name, PyList_GET_ITEM(g->parts, 0)) < 0)
        return -1;
    for (Py_ssize_t i = 1; i < parts; i++) {
        if (save_child_of(p, PyList_GET_ITEM(g->parts, i), EDGE_PLAIN, NULL) < 0 ||
            output_write(p, close, 2) < 0)
            return -1;
    }
    return 0;
}
#endif

/* Step 5, without the memo. */
static int write_global(pickler *p, const global_ref *g)
{
    int top_level = g->parent == g->module;
    PyObject *name = top_level ? last_part(g) : g->name;

    if (p->proto >= 4) {
        if (save_child_of(p, g->module_name, EDGE_PLAIN, NULL) < 0 ||
            save_child_of(p, name, EDGE_PLAIN, NULL) < 0)
            return -1;
        return output_write_byte(p, (char)OP_STACK_GLOBAL);
    }
    if (top_level)
        return write_global_lines(p, g->module_name, name);
        /* A nested name has no GLOBAL form below protocol 4. */
#if PY_VERSION_HEX >= 0x030D0000
    return write_getattr_chain(p, g);
#else
    PyObject *value = Py_BuildValue("(O(OO))", G.getattr, g->parent, last_part(g));
    if (value == NULL)
        return -1;
    int status = save_reduce_value(p, value, NULL);
    Py_DECREF(value);
    return status;
#endif
}

int save_global(pickler *p, PyObject *obj, PyObject *name)
{
    global_ref g = {0};
    int status = resolve_global(obj, name, &g);
    if (status == 0 && p->proto >= 2)
        status = save_extension(p, obj, &g);
    if (status == 0)
        status = write_global(p, &g);
    if (status == 0)
        status = memo_put(p, obj, NULL);
    global_ref_clear(&g);
    return status < 0 ? -1 : 0;
}
