from evoskill.cli import main

main()
