/* A tiny shared library: one exported function and a relocated data pointer. */
static const char message[] = "demo";
const char *demo_name_ptr = message;

int demo_answer(int x) { return x * 2 + (int)sizeof(message); }
