// The kernels with their products' k order reversed: what the order tests must catch.
#define SCIFACT_VARIANT broken
#define SCIFACT_ENTRY scifact_emulate_broken
#define SCIFACT_BREAK_ORDER
#include "kernels.cpp"
