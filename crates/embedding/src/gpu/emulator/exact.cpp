// The kernels as they are.
#define SCIFACT_VARIANT exact
#define SCIFACT_ENTRY scifact_emulate_exact
#include "kernels.cpp"
