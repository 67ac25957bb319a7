#include <iostream>

#include "mesh/cli/app.h"

int main(int argc, char** argv) { return mesh::cli::run_cli(argc, argv, std::cout, std::cerr); }
