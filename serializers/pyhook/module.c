/* serializers/pyhook/module.c -- sertrace._pyhook: names and module init.
 *
 * The interned attribute names every file uses, the module's method
 * table and PyInit__pyhook, which readies the types (writers, saver, hook,
 * dill's logger proxy) and puts dill's `trace` function in the proxy
 * type's dict (a plain callable: no bound method per call).
 */
#include "pyhook.h"

/* ---- interned names ---------------------------------------------------- */

PyObject *str_write, *str_framer, *str_file_write, *str_current_frame;
PyObject *str_memo, *str_dispatch, *str_proto, *str_trace;
PyObject *str_trace_depth, *str_save, *str_dump, *str_module;
PyObject *str_frame_target;
PyObject *str_save_reduce, *str_batch_setitems, *str_batch_appends, *str_self, *str_obj;
PyObject *str_k, *str_v, *str_cls, *str_args, *str_kwargs, *str_func, *str_state;
PyObject *str_state_setter, *str_save_pers, *str_persistent_id;

static PyMethodDef module_methods[] = {
    {"hook_class", (PyCFunction)(void (*)(void))py_hook_class, METH_FASTCALL,
     "hook_class(cls, name): put sertrace hooks around cls.save and cls.dump; dumps are "
     "named `name`.  Idempotent."},
    {"unhook_class", py_unhook_class, METH_O,
     "unhook_class(cls) -> bool: remove the hooks hook_class() put in cls."},
    {"is_hooked", py_is_hooked, METH_O, "is_hooked(cls) -> bool: cls has its own hooks."},
    {"wrap_logger", py_wrap_logger, METH_O,
     "wrap_logger(adapter) -> proxy to assign to dill._dill.logger."},
    {"untraced", py_untraced, METH_NOARGS,
     "untraced() -> {class: reason}: hooked pickler classes whose dumps ran untraced "
     "because the hooks cannot follow them (recorded once per class)."},
    {"tracing", py_tracing, METH_O,
     "tracing(pickler) -> bool: a traced dump of this pickler is running on this thread."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sertrace._pyhook",
    .m_doc = "C hooks that trace pure-Python picklers (dill.Pickler, pickle._Pickler) with "
             "sertrace.  Use sertrace.dill, not this module.",
    .m_size = -1,
    .m_methods = module_methods,
};

#define INTERN(var, text)                                                                          \
    do {                                                                                           \
        if ((var) == NULL && ((var) = PyUnicode_InternFromString(text)) == NULL)                   \
            return NULL;                                                                           \
    } while (0)

PyMODINIT_FUNC PyInit__pyhook(void)
{
    PyObject *m;

    INTERN(str_write, "write");
    INTERN(str_framer, "framer");
    INTERN(str_file_write, "file_write");
    INTERN(str_current_frame, "current_frame");
    INTERN(str_memo, "memo");
    INTERN(str_dispatch, "dispatch");
    INTERN(str_proto, "proto");
    INTERN(str_trace, "trace");
    INTERN(str_trace_depth, "_trace_depth");
    INTERN(str_save, "save");
    INTERN(str_dump, "dump");
    INTERN(str_module, "__module__");
    INTERN(str_frame_target, "_FRAME_SIZE_TARGET");
    INTERN(str_save_reduce, "save_reduce");
    INTERN(str_batch_setitems, "_batch_setitems");
    INTERN(str_batch_appends, "_batch_appends");
    INTERN(str_save_pers, "save_pers");
    INTERN(str_persistent_id, "persistent_id");
    INTERN(str_self, "self");
    INTERN(str_obj, "obj");
    INTERN(str_k, "k");
    INTERN(str_v, "v");
    INTERN(str_cls, "cls");
    INTERN(str_args, "args");
    INTERN(str_kwargs, "kwargs");
    INTERN(str_func, "func");
    INTERN(str_state, "state");
    INTERN(str_state_setter, "state_setter");
    if (PyType_Ready(&writer_type) < 0 || PyType_Ready(&hook_type) < 0 ||
        PyType_Ready(&saver_type) < 0 || PyType_Ready(&trace_fn_type) < 0 ||
        PyType_Ready(&logger_proxy_type) < 0)
        return NULL;
    {
        trace_fn *tf = PyObject_New(trace_fn, &trace_fn_type);
        int rc;
        if (tf == NULL)
            return NULL;
        tf->vectorcall = proxy_trace;
        rc = PyDict_SetItem(logger_proxy_type.tp_dict, str_trace, (PyObject *)tf);
        Py_DECREF(tf);
        if (rc < 0)
            return NULL;
        PyType_Modified(&logger_proxy_type);
    }
    m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Hook", (PyObject *)&hook_type) < 0 ||
        PyModule_AddObjectRef(m, "LoggerProxy", (PyObject *)&logger_proxy_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
