/* A library that depends on libdemo.so.1 (found only through its RPATH in tests). */
int demo_answer(int x);

int user_answer(int x) { return demo_answer(x) + 1000; }
