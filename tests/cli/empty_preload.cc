// A shared library that does nothing. The process tests inject it in place of the collector,
// so that they test the command line and the launcher, not the collector.
extern "C" int rankscope_cli_test_empty_preload() { return 0; }
