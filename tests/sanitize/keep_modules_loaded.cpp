// Linked into every executable of a sanitizer build (CMakeLists.txt, PARBENCH_SANITIZE): a
// dlclose that keeps the library mapped. LeakSanitizer names a leak's library from what is
// mapped when the process ends; MPI_Finalize unloads Open MPI's components, so the leaks
// they make by design would be "<unknown module>" and no suppression (tests/sanitize/
// lsan.supp) could name them. parbench itself never unloads a library.
extern "C" int dlclose(void*) { return 0; }
