// bench/attention.cpp — PLACEHOLDER written by the lead so the tree configures; its owner replaces it.
int main() { return 1; }
