/* A shared library that loads but exports neither kvfuzz_executor_declare nor
 * kvfuzz_executor_run: kvfuzz-worker must refuse it by name (fuzz/tests/cpp_adapter_test.sh). */
int not_an_executor(void);
int not_an_executor(void) { return 0; }
