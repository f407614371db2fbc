// Placeholder until the command line lands (issue 2).
#include <cstdio>
int main() {
  std::puts("vigil " VIGIL_VERSION);
  return 0;
}
