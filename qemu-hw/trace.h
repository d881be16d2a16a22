#include "trace/trace-hw_pib.h"
