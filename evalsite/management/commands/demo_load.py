from typing import Any

from django.core.management.base import BaseCommand

from evalsite import demo


class Command(BaseCommand):
    help = "Load the demo team, user, agents and dataset once (nothing changes when the demo user exists)."

    def handle(self, *args: Any, **options: Any) -> None:
        data = demo.demo_load()
        if data.created:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Demo loaded: team “{demo.DEMO_TEAM}”, user “{demo.DEMO_USERNAME}”, "
                    f"agents “{demo.KNOWLEDGE_AGENT}” and “{demo.LLM_AGENT}”, "
                    f"dataset “{demo.DATASET}” ({len(demo.CASES)} cases)."
                )
            )
        else:
            self.stdout.write("Demo data already present; nothing changed.")
