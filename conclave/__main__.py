from conclave.cli import main

main()
