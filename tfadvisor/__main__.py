from tfadvisor.cli import main

main()
