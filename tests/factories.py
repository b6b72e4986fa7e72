import factory
from django.contrib.auth.models import User

from accounts.models import Membership, Team
from agents.models import Agent, AgentVersion
from datasets.models import Dataset, TestCase


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.OWNER


class AgentFactory(factory.django.DjangoModelFactory):
    """An agent with a first version (the factory sets current_version)."""

    class Meta:
        model = Agent
        skip_postgeneration_save = True

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"Agent {n}")
    kind = Agent.Kind.KNOWLEDGE

    @factory.post_generation
    def version(agent, create, extracted, **kwargs):  # noqa: N805
        if not create:
            return
        fields = {
            "instructions": "You are the support assistant for Acme Cloud. Answer from the knowledge.",
            "knowledge": "Refunds are available within 30 days of purchase.\n\nSupport is open 9-17 CET on weekdays.",
            **kwargs,
        }
        agent.current_version = AgentVersion.objects.create(agent=agent, number=1, note="Created", **fields)
        agent.save(update_fields=["current_version"])


class DatasetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dataset

    agent = factory.SubFactory(AgentFactory)
    name = factory.Sequence(lambda n: f"Dataset {n}")
    status = Dataset.Status.READY


class TestCaseFactory(factory.django.DjangoModelFactory):
    __test__ = False

    class Meta:
        model = TestCase

    dataset = factory.SubFactory(DatasetFactory)
    position = factory.Sequence(lambda n: n)
    question = factory.Sequence(lambda n: f"How long is the refund window? ({n})")
    expected_answer = "Refunds are available within 30 days of purchase."
