#include "mesh/control/app.h"

int main(int argc, char** argv) { return mesh::control::run_main(argc, argv); }
